FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ctxweb ctxweb
COPY compaction compaction
COPY sessions_app sessions_app
RUN pip install --no-cache-dir .
COPY . .
RUN CTX_MANIFEST_STATIC=1 SECRET_KEY=collectstatic python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "ctxweb.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4"]
