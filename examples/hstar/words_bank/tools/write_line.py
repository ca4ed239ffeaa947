import json, sys; a = json.loads(sys.argv[1]); open(a["path"], "w").write(a["text"] + "\n")
