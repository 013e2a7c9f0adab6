from trainplan.interfaces.cli import main

main()
