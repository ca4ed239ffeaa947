# Before finishing: some file in the workspace must have been written, and none may be empty.
shopt -s nullglob
files=(/app/*)
if [ ${#files[@]} -eq 0 ]; then
  echo "The workspace holds no output file yet."
  exit 1
fi
for f in "${files[@]}"; do
  if [ -f "$f" ] && [ ! -s "$f" ]; then
    echo "$f is empty."
    exit 1
  fi
done
exit 0
