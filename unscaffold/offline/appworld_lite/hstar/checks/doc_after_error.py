# After a failed API call: point at the API's documentation instead of guessing again.
import json
import re
import sys

context = json.loads(sys.argv[1])
match = re.search(r"Response status code is (4\d\d)", context.get("output", ""))
if match and context.get("exit_code", 0) != 0:
    print(f"An API call failed with status {match.group(1)}. Read its message; for parameter names and types "
          "see apis.api_docs.show_api_doc(app_name=..., api_name=...) before retrying.")
    sys.exit(1)
