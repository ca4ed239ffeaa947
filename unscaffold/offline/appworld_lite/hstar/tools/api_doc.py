# Show one API's documentation (parameters, types, defaults, result), or the APIs of an app.
import json
import os
import sys

sys.path.insert(0, os.getcwd())
from apis import apis  # noqa: E402

args = json.loads(sys.argv[1])
app, api = args["app_name"], args.get("api_name")
try:
    if not api:
        for entry in apis.api_docs.show_api_descriptions(app_name=app):
            print(f"{app}.{entry['name']}: {entry['description']}")
        sys.exit(0)
    doc = apis.api_docs.show_api_doc(app_name=app, api_name=api)
except Exception as e:  # the world's own error message is the useful answer
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
print(f"{app}.{api}: {doc.get('description', '')}")
print("parameters:")
for p in doc.get("parameters", []):
    need = "required" if p.get("required") else f"default {p.get('default')!r}"
    print(f"  {p['name']} ({p.get('type', 'any')}, {need}): {p.get('description', '')}")
returns = doc.get("returns", doc.get("response_schemas"))
print(f"returns: {json.dumps(returns) if not isinstance(returns, str) else returns}")
print(f"call: apis.{app}.{api}(" + ", ".join(f"{p['name']}=..." for p in doc.get("parameters", [])
                                               if p.get("required")) + ")")
