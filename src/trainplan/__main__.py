import sys

try:  # Ctrl-C while the command line is still being imported: the same status as during a run (issue 29)
    from trainplan.interfaces.cli import main
except KeyboardInterrupt:
    print("trainplan: interrupted", file=sys.stderr)
    sys.exit(130)

main()
