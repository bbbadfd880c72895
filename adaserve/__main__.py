from adaserve.cli import main

main()
