"""Pages for people: report.html, the trend page, the terminal summary."""
