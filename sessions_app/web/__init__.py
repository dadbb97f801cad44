"""The browser's side: pages (``views``), what they can do (``actions``, ``project_settings``), their
forms and page selectors (``pages``), and how access errors become 404 and 403 pages (``access``)."""
