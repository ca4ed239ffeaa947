"""The apps of appworld_lite, one module each; importing one registers its APIs in `appkit.APPS`."""
