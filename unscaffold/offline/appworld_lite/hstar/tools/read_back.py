# Read one entity back through a show_ API (after a write, or before a delete) and print it whole.
import json
import os
import sys

sys.path.insert(0, os.getcwd())
from apis import apis  # noqa: E402

args = json.loads(sys.argv[1])
app, api = args["app_name"], args["api_name"]
arguments = dict(args.get("arguments") or {})
if not api.startswith("show_"):
    print(f"read_back only calls show_ APIs, not {api}: it must not change anything.")
    sys.exit(2)
try:
    doc = apis.api_docs.show_api_doc(app_name=app, api_name=api)
    if any(p["name"] == "access_token" for p in doc.get("parameters", [])) and "access_token" not in arguments:
        me = apis.supervisor.show_profile()
        passwords = {a["account_name"]: a["password"] for a in apis.supervisor.show_account_passwords()}
        arguments["access_token"] = apis[app].login(username=me["email"], password=passwords[app])["access_token"]
    result = apis[app][api](**arguments)
except Exception as e:
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
print(json.dumps(result, indent=2, sort_keys=True))
