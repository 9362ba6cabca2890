"""The five seeds (../shared/seeds/): what each seed's table shows
(tables.py, with the shared kit.py), the published figures beside it
(published.py), which runs of a database make each column (runs.py), and
the tables and page `./run.py seeds` prints and writes (report.py). A
results-stage reader of the database; pipeline/seedscli.py runs the seeds'
study and calls it."""
