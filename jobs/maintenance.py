"""Entry point of the maintenance job (nightly): `python jobs/maintenance.py --config
jobs/configs/maintenance.yaml` locally (starts a local Ray), or `ray job submit --
python jobs/maintenance.py --ray-address auto ...` on a cluster; or `memray jobs maintenance`."""

import sys

from memray.batch.cli import main

if __name__ == "__main__":
    sys.exit(main("maintenance", sys.argv[1:]))
