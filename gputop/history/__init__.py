"""The job's memory: each run of a job gputop watched, kept to compare the next run with."""
