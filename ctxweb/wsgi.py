import os

from django.core.wsgi import get_wsgi_application

from ctxweb.warm import warm_up

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
application = get_wsgi_application()
warm_up()
