"""tito: the TinyTorch course command line (release, export, test, status, grade)."""
