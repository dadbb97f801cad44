"""Generated secrets of every kind redaction knows, each with a text it sits in: for the engine's tests
(``tests/compaction/test_redact.py``) and the property that none of them is stored anywhere
(``tests/sessions_app/test_redaction.py``). Random, as a key generator makes them."""

from __future__ import annotations

import base64
import json
import random
import string
from typing import Any

from hypothesis import strategies as st

from compaction.redact import HIGH_ENTROPY, KEYWORD

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def chars(alphabet: str, n: int) -> st.SearchStrategy[str]:
    """``n`` random characters of ``alphabet``, as a key generator makes them (not ``"0000…"``)."""
    return st.integers(0, 2**32).map(lambda seed: "".join(random.Random(seed).choices(alphabet, k=n)))


def mixed(alphabet: str, n: int) -> st.SearchStrategy[str]:
    """``n`` characters of ``alphabet`` holding an upper-case letter, a lower-case one and a digit."""
    return chars(alphabet, n - 3).map(lambda s: "Q" + s + "z7")


def _jwt(payload: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(payload)}.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


def _pem(body: str) -> str:
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"


def _in(contexts: list[str], secrets: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    """A secret and one of ``contexts`` with it in place of ``{}``."""
    return st.tuples(secrets, st.sampled_from(contexts)).map(lambda p: (p[0], p[1].replace("{}", p[0])))


# Where a key sits in what agents send: alone, after "=" in a URL or an environment, in a header,
# after a URL-encoded quote, after a letter of another script, glued to a dash.
# after an escaped newline of JSON text, a URL-encoded "=", a terminal's colour.
_AFTER = ["{}", "?token={}&x=1", "export API_KEY={}", "Cookie: session={}", "%22{}%22", "密钥是{}", "key-{}",
          "Authorization: Bearer {}", '{"apiKey":"{}"}', '{"content": "# keys\\n{}\\n"}', "?k%3D{}",
          "\x1b[1;32m{}\x1b[0m"]  # fmt: skip
# A value by its name, in the forms configuration, code, shells and HTTP write it.
_BY_NAME = [
    'db_password = "{}"', "DB_PASSWORD={}", "password: {}", "host=db password={} dbname=app",
    '"accessToken": "{}"', "authToken={}", "SECRET_KEY = '{}'", "passphrase: {}", "--password {}",
    "--api-key={}", "curl -H 'X-Api-Key: {}' https://api.example.com", "Authorization: Basic {}",
    "<password>{}</password>", "$env:CLIENT_SECRET = \"{}\"", "spring.datasource.password={}",
    # A name and its value apart.
    "env:\n  - name: DB_PASSWORD\n    value: {}", '{"env":[{"name":"DB_PASSWORD","value":"{}"}]}',
    '<add key="ApiKey" value="{}"/>', "define('DB_PASSWORD', '{}');", "os.environ.setdefault('API_TOKEN', '{}')",
    'std::env::set_var("API_KEY", "{}");',
    # Commands' own places.
    "curl -u admin:{} https://x.example", "docker login -u me -p {} registry.example", "mysql -uroot -p{} app",
    "sshpass -p '{}' ssh host", "PGPASSWORD={} psql -h db", "ALTER USER app IDENTIFIED BY '{}';",
    "machine api.example.com login me password {}", "set -gx OPENAI_API_KEY {}", 'setx OPENAI_API_KEY "{}"',
    "Cookie: theme=dark; session={}", "curl -H 'Authorization: Bearer {}'", "char password[32] = \"{}\";",
    # Code's own forms: a PHP or Ruby hash, a typed declaration, a sigil, a string prefix, a default.
    "'password' => '{}',", "$config['password'] => '{}'", 'password: str = "{}"', 'const API_KEY: string = "{}";',
    'var apiKey string = "{}"', '$password = "{}";', 'password = b"{}"', 'os.getenv("DB_PASSWORD", "{}")',
    "process.env.API_KEY || '{}'", 'ds.setPassword("{}");', '<property name="password" value="{}"/>',
    "java -Djavax.net.ssl.keyStorePassword={} -jar app.jar", 'HTTPBasicAuth("admin", "{}")',
    '#define PASSWORD "{}"', "ENV DB_PASSWORD {}", "requirepass {}", "ROOT_PW={}", "密码: {}",
    '"--api-key", "{}"', "**Password:** {}", "- **API_KEY**: `{}`", "| DB_PASSWORD | `{}` |",
    "sshpass -p{} ssh host", "spring.datasource.password=Hunter{}", "PGPASSWORD={} psql",
    "OPENAI_KEY={}", "API key: {}", "echo {} | gh auth login --with-token", 'gh secret set API_KEY --body "{}"',
    "smtp.login('me@x.com', '{}')", "RABBITMQ_DEFAULT_PASS={}", 'setPassword("{}");', "redis-cli -h h -a {} ping",
    'variable "db_password" {\n  default = "{}"\n}', "password: |\n  {}", "mongosh -u app -p {} db",
    # Through a terminal's colours, a URL's or HTML's escapes.
    "DB_PASSWORD=\x1b[32m{}\x1b[0m", "\x1b[01;31m\x1b[KDB_PASSWORD\x1b[m\x1b[K={}",
    "next=https%3A%2F%2Fapp%2Fcb%3Faccess_token%3D{}%26x%3D1", "state=%7B%22token%22%3A%22{}%22%7D",
    "password=&quot;{}&quot;",
    # Tables, labels and prose; a netrc across lines; more commands; an AWS parameter read back.
    "machine github.com\nlogin octocat\npassword {}\n", "default login anonymous password {}",
    "====== Data ======\nKey         Value\n---         -----\npassword    {}\n", "│ DB_PASSWORD   │ {} │",
    "PASSWORD\t{}", "Password:\n{}", "Client Secret\n{}", "The admin password is {}.",
    "mysqldump -uroot -p'{}' db", "sqlcmd -S x -U sa -P '{}'", "rabbitmqctl add_user admin {}",
    "htpasswd -b .htpasswd admin {}", "http -a admin:{} x.com", "sqlplus scott/{}@orcl",
    "ssh-keygen -t ed25519 -N '{}'", "vault login {}", "npm config set //registry.npmjs.org/:_authToken {}",
    "#HttpOnly_.example.com\tTRUE\t/\tTRUE\t0\tsessionid\t{}", "<ns:Password>{}</ns:Password>",
    '{"Parameter": {"Name": "/prod/db/password", "Type": "SecureString", "Value": "{}"}}',
    # A value on its own line after a sentence; prose; what arrives JSON-escaped in a tool's output.
    "Please use the following password to proceed to installation:\n\n{}\n",
    "Password for the elastic user (reset with `bin/elasticsearch-reset-password -u elastic`):\n  {}\n",
    "Your API token is:\n{}\n", "Your password is: {}", "Generated password for user bob: {}",
    "The password for the admin account is {}", "Password set to {}", "Using password {}",
    '{"output": "password         {}\\n"}', '{"output": "- name: DB_PASSWORD\\n  value: {}\\n"}',
    '{"output": "machine x\\r\\n\\tlogin bob\\r\\n\\tpassword {}"}',
    # Secrets Manager, terraform, 1Password, SQL, HTML, Python's auth tuples, redis, more commands.
    '{"SecretString": "{}", "Name": "prod/api"}',
    '{\n  "db_password": {\n    "sensitive": true,\n    "type": "string",\n    "value": "{}"\n  }\n}',
    '{"id":"password","type":"CONCEALED","label":"password","value":"{}"}',
    "CREATE USER 'app'@'localhost' IDENTIFIED WITH mysql_native_password BY '{}';", "CREATE USER app IDENTIFIED BY {};",
    "SET PASSWORD FOR 'app'@'%' = PASSWORD('{}');", "&lt;password&gt;{}&lt;/password&gt;",
    '<input type="password" name="password" value="{}">', "requests.get(url, auth=('bob', '{}'))",
    "aiohttp.BasicAuth('bob', '{}')", "127.0.0.1:6379> AUTH {}", "AUTH default {}", "PGPASS={}",
    "echo '{}' | sudo -S apt-get update", "echo 'bob:{}' | chpasswd", "openssl enc -aes-256-cbc -k {}",
    "zip -P {} out.zip f", "7z a -p{} a.7z f", "ldapsearch -x -D cn=admin -w {}", "smbclient //srv/share -U bob%{}",
    "keytool -genkey -storepass {} -keypass x", "mc alias set m http://minio:9000 minioadmin {}",
    "lftp -u bob,{} host", "net use \\\\srv\\share /user:CORP\\bob {}", "mysqladmin -u root password {}",
    'ConvertTo-SecureString "{}" -AsPlainText -Force', "echo {} | wrangler secret put API_TOKEN",
    "vercel env add X production <<< {}",
]  # fmt: skip
# A URL's password, with the signs detect-secrets' rule leaves.
_URLS = ["postgresql://admin:{}@db:5432/app", "redis://:{}@cache:6379/0", "DATABASE_URL=mongodb://app:{}@mongo/db"]


def _base64_pem(body: str) -> str:
    return base64.b64encode(_pem(body).encode()).decode()


def jwt_sized(p: tuple[int, int]) -> str:
    return _jwt({"sub": p[0], "scope": "x" * p[1]})


# kind -> (the secret, the text it sits in): what a ``[secret:kind:…]`` must replace.
SECRETS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "aws-access-key": _in(_AFTER, chars(string.ascii_uppercase + string.digits, 16).map(lambda s: "AKIA" + s)),
    "aws-secret-key": _in(['aws_secret_access_key = "{}"', "aws_secret_access_key = {}", "AWS_SECRET_ACCESS_KEY={}",
                           '{"AWS_SECRET_ACCESS_KEY": "{}"}', "aws configure set aws_secret_access_key {}"],
                          chars(B64, 40)),
    "github-token": _in(_AFTER, st.one_of(chars(ALNUM, 36).map(lambda s: "ghp_" + s),
                                          mixed(ALNUM + "_", 82).map(lambda s: "github_pat_" + s))),
    "gitlab-token": _in(_AFTER, chars(URLSAFE, 20).map(lambda s: "glpat-" + s)),
    "slack-token": _in(_AFTER, chars(ALNUM, 24).map(lambda s: "xoxb-1234567890-12345678-" + s)),
    "stripe-access-key": _in(_AFTER, st.tuples(st.sampled_from(["sk_live_", "sk_test_", "rk_live_"]),
                                                mixed(ALNUM, 24)).map("".join)),
    "npm-token": _in([*_AFTER, "//registry.npmjs.org/:_authToken={}", '_authToken = "{}"'],
                     mixed(ALNUM, 36).map(lambda s: "npm_" + s)),
    "google-api-key": _in(_AFTER, chars(URLSAFE, 35).map(lambda s: "AIza" + s)),
    "huggingface-token": _in(_AFTER, mixed(string.ascii_letters, 34).map(lambda s: "hf_" + s.replace("7", "q"))),
    "groq-api-key": _in(_AFTER, mixed(ALNUM, 52).map(lambda s: "gsk_" + s)),
    "openrouter-api-key": _in(_AFTER, chars("0123456789abcdef", 64).map(lambda s: "sk-or-v1-" + s)),
    "private-key": st.one_of(
        chars(B64, 200).map(lambda s: (s[:64], _pem(s))),
        chars(B64, 200).map(_base64_pem).map(lambda b: (b, f"users:\n- name: me\n  user:\n    client-key-data: {b}")),
    ),
    # Up to 12 kB: a JWT runs far past the string that gates its rule.
    "jwt": _in([*_AFTER, "?id_token={}", "TOKEN={}"],
               st.tuples(st.integers(0, 10**9), st.one_of(st.integers(0, 1_000), st.integers(8_000, 12_000)))
               .map(jwt_sized)),
    "basic-auth": st.one_of(
        mixed(ALNUM, 16).map(lambda s: (s, f"postgres://deploy:{s}@db.internal:5432/app")),
        # A password holding an unescaped "@" or "/"; a token as the user before a password all know.
        mixed(ALNUM, 16).map(lambda s: (f"{s[:5]}@{s[5:]}", f"postgres://app:{s[:5]}@{s[5:]}@db/app")),
        mixed(ALNUM, 16).map(lambda s: (f"{s[:5]}/{s[5:]}", f"mysql://root:{s[:5]}/{s[5:]}@db/app")),
        mixed(ALNUM, 40).map(lambda s: (s, f"git clone https://{s}:x-oauth-basic@github.com/o/r.git")),
        _in(_URLS, mixed(ALNUM + "#!*+,;=()", 16)),
    ),
    "anthropic-api-key": _in(_AFTER, chars(URLSAFE, 93).map(lambda s: "sk-ant-api03-" + s)),
    "openai-api-key": _in(_AFTER, mixed(URLSAFE, 48).map(lambda s: "sk-proj-" + s)),
    "ctxweb-api-key": _in(_AFTER, mixed(URLSAFE, 43).map(lambda s: "ctx_" + s)),
    **{kind: _in(_AFTER, secrets) for kind, secrets in {
        "deepseek-api-key": chars("0123456789abcdef", 31).map(lambda s: "sk-7" + s),
        "xai-api-key": mixed(ALNUM, 80).map(lambda s: "xai-" + s),
        "perplexity-api-key": mixed(ALNUM, 48).map(lambda s: "pplx-" + s),
        "langsmith-api-key": st.tuples(chars("0123456789abcdef", 32), chars("0123456789abcdef", 10))
        .map(lambda p: f"lsv2_pt_{p[0]}_{p[1]}"),
        "tavily-api-key": chars(ALNUM, 32).map(lambda s: "tvly-dev-" + s),
        "replicate-api-token": mixed(ALNUM, 37).map(lambda s: "r8_" + s),
        "pinecone-api-key": mixed(ALNUM, 70).map(lambda s: "pcsk_" + s),
        "shopify-token": chars("0123456789abcdef", 32).map(lambda s: "shpat_" + s),
        "linear-api-key": chars(ALNUM, 40).map(lambda s: "lin_api_" + s),
        "doppler-token": chars(ALNUM, 44).map(lambda s: "dp.st.prd." + s),
        "figma-token": chars(URLSAFE, 40).map(lambda s: "figd_" + s),
        "databricks-token": chars("0123456789abcdef", 31).map(lambda s: "dapi7" + s),
        # detect-secrets' rules, run around where a pattern finds their tails (``_PATTERN_GATES``).
        "telegram-bot-token": st.tuples(st.integers(10**7, 10**10 - 1), chars(URLSAFE, 35))
        .map(lambda p: f"{p[0]}:{p[1]}"),
        "discord-bot-token": st.tuples(st.sampled_from("MNO"), chars(URLSAFE, 23), chars(URLSAFE, 6),
                                       chars(URLSAFE, 27)).map(lambda p: f"{p[0]}{p[1]}.{p[2]}.{p[3]}"),
        "age-secret-key": chars(string.ascii_uppercase + string.digits, 58).map(lambda s: "AGE-SECRET-KEY-1" + s),
    }.items()},
    "mailgun-api-key": _in(_AFTER, chars("0123456789abcdefghijklmnopqrstuvwxyz", 31).map(lambda s: "key-7" + s)),
    "square-token": _in(_AFTER, mixed(URLSAFE, 22).map(lambda s: "sq0atp-" + s)),
    "rubygems-api-key": _in(_AFTER, chars("0123456789abcdef", 47).map(lambda s: "rubygems_7" + s)),
    "discord-webhook": _in(["https://discord.com/api/webhooks/123456789012345678/{}"], mixed(URLSAFE, 68)),
    "url-credential": _in(["https://x.example/api?key={}", "https://x.example/?sessionid={}&a=1",
                           "https://app.example/cb?code={}&state=x", "https://cdn.example/v?Signature={}&Key-Pair-Id=A"],
                          mixed(ALNUM, 24)),
    "putty-private-key": chars(B64, 120).map(lambda s: (s[:64], "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n"
                                                        f"Private-Lines: 2\n{s[:64]}\n{s[64:]}\nPrivate-MAC: 00ff")),
    "sentry-dsn": _in(["dsn='https://{}@o123.ingest.sentry.io/456'"],
                      chars("0123456789abcdef", 31).map(lambda s: "7" + s)),
    KEYWORD: _in(_BY_NAME, mixed(ALNUM, 20)),
    # 64 characters: a random 48 falls under detect-secrets' 4.5 bits a character now and then.
    HIGH_ENTROPY: mixed(B64, 64).map(lambda s: (s, f'"{s}"')),
}  # fmt: skip
# A private key's lines as strings of their own (a list of lines, a JSON array of them).
PEM_LINES = chars(B64, 200).map(lambda s: (s[:64], _pem(s).split("\n")))


# Kinds told by their context (a name, a URL, a header), not by the value's own shape.
BY_CONTEXT = {
    "keyword",
    "high-entropy",
    "aws-secret-key",
    "basic-auth",
    "private-key",
    "discord-webhook",
    "url-credential",
    "putty-private-key",
    "sentry-dsn",
}


def leaked(secret: str, text: str, piece: int = 12) -> bool:
    """Whether any ``piece`` characters of ``secret`` in a row are in ``text`` (a secret cut short,
    its prefix replaced and the rest left, is still leaked)."""
    if len(secret) <= piece:
        return secret in text
    return any(secret[i : i + piece] in text for i in range(len(secret) - piece + 1))
