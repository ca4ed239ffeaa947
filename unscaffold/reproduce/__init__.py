"""`unscaffold reproduce`: a published table as one resumable plan of `unscaffold` commands."""
