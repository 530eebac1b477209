"""What the summary and the fits look like to a reader: the summary's text and the HTML report."""
