"""The five seeds (../shared/seeds/): what each seed's table shows
(tables.py, with the shared kit.py), the published figures beside it
(published.py), which runs of a database make each column (runs.py), the
tables rendered (report.py), printed and written as the page by
`./run.py seeds` (page.py), and what of the campaign is left (campaign.py). A
results-stage reader of the database; pipeline/seedscli.py runs the seeds'
study and calls it."""
