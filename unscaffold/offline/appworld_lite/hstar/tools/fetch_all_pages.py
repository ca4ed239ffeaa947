# Call a paginated list API page after page until a page comes back empty; print every item.
import json
import os
import sys

sys.path.insert(0, os.getcwd())
from apis import apis  # noqa: E402

MAX_PAGES = 500
args = json.loads(sys.argv[1])
app, api = args["app_name"], args["api_name"]
arguments = dict(args.get("arguments") or {})
try:
    doc = apis.api_docs.show_api_doc(app_name=app, api_name=api)
    names = {p["name"] for p in doc.get("parameters", [])}
    if "page_index" not in names:
        print(f"{app}.{api} is not paginated (it has no page_index); call it directly.")
        sys.exit(1)
    if "access_token" in names and "access_token" not in arguments:
        me = apis.supervisor.show_profile()
        passwords = {a["account_name"]: a["password"] for a in apis.supervisor.show_account_passwords()}
        arguments["access_token"] = apis[app].login(username=me["email"], password=passwords[app])["access_token"]
    if args.get("page_limit"):
        arguments["page_limit"] = int(args["page_limit"])
    items, page = [], 0
    while page < MAX_PAGES:
        batch = apis[app][api](**arguments, page_index=page)
        if not batch:
            break
        items += batch
        page += 1
except Exception as e:
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
for item in items:
    print(json.dumps(item, sort_keys=True))
print(f"[{len(items)} items from {page} full or partial pages; page_index={page} came back empty]")
