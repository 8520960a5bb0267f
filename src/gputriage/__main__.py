from gputriage.launch import main

main()
