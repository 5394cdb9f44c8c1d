"""``orchestrace view``: the browser view of output directories (episodes by task, an episode's timeline,
replay, credit, a turn, two rollouts compared), served locally or exported as one offline HTML file.

``store.py`` reads the directories, ``api.py`` serves the pages and their JSON, ``export.py`` writes the
self-contained file, ``static/`` holds the pages (HTML, CSS and JavaScript modules, no build step).
"""
