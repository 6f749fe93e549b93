"""Support's tools: the admin pages that show what a person was sent (pages.py), "send
test to me" from the template admin (send_to_me.py), and demo data (demo.py, for
`manage.py seed_demo`). Registered by deliveries/admin.py."""
