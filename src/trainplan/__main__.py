from trainplan.cli import main

main()
