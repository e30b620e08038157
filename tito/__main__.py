from tito.cli import main

raise SystemExit(main())
