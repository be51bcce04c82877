"""Real mail servers for the IMAP trigger's tests, each a private instance on
free loopback ports with configuration, certificates and mail folders made
in a temporary folder at test time:

- Dovecot (IMAP): implicit TLS and STARTTLS listeners, users in a
  passwd-file, maildirs under the folder. Started as `dovecot -c FILE -F`.
- Postfix (SMTP): an smtps (implicit TLS) and a submission (STARTTLS
  required) listener, SASL through the Dovecot instance's auth socket, and
  delivery of example.test mail into maildirs under the folder, where the
  tests read the replies. Started as its own instance (`postfix -c DIR`).

Both run as root (CI and the development machines are), which both need to
bind and to switch to their own users; mail is stored as nobody.

The certificates: a test CA and a server certificate for localhost and
127.0.0.1 (openssl req), so af must be given the CA as ca_file; a second,
unrelated CA lets a test prove that an untrusted server is refused.
"""
import email
import imaplib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

DOMAIN = "example.test"
PASSWORD = "secret-pw-7"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=20, proc=None, log=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.05)
    extra = ""
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            extra = f.read()[-3000:]
    raise RuntimeError(f"port {port} never opened\n{extra}")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          **kw)


def make_ca(d, name):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".pem")
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
         "-out", crt, "-days", "2", "-subj", f"/CN=af test {name}",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    return key, crt


def make_certs(d):
    """A CA, a server certificate it signs, and an unrelated CA."""
    ca_key, ca = make_ca(d, "ca")
    _, other_ca = make_ca(d, "other-ca")
    key, csr, crt = (os.path.join(d, n) for n in
                     ("server.key", "server.csr", "server.crt"))
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "basicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n")
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
         "-out", csr, "-subj", "/CN=localhost"])
    run(["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
         "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext])
    os.chmod(key, 0o600)
    return {"ca": ca, "other_ca": other_ca, "cert": crt, "key": key}


class MailServers:
    """Dovecot and Postfix for one test; stop() ends both and removes
    everything. users: the local parts that get a mailbox and a password."""

    def __init__(self, users=("bot", "alice", "mallory"), smtp=True,
                 tls=True):
        """tls=False: a Dovecot without TLS at all, which offers no
        STARTTLS and would accept a login in the clear."""
        self.dir = tempfile.mkdtemp(prefix="af-mail-")
        os.chmod(self.dir, 0o755)
        self.users = list(users)
        self.tls = tls
        self.certs = make_certs(self.dir)
        self.imaps_port = free_port()
        self.imap_port = free_port()
        self.dovecot = None
        self.postfix_dir = None
        self.smtps_port = self.submission_port = None
        try:
            self._write_dovecot()
            self.start_dovecot()
            if smtp:
                self._start_postfix()
        except BaseException:
            self.stop()
            raise

    # Dovecot

    def _write_dovecot(self):
        d = self.dir
        for sub in ("dovecot-run", "dovecot-state", "mail"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        shutil.chown(os.path.join(d, "mail"), "nobody", "nogroup")
        with open(os.path.join(d, "passwd"), "w") as f:
            for u in self.users:
                f.write(f"{u}@{DOMAIN}:{{PLAIN}}{PASSWORD}::::::\n")
        self.dovecot_conf = os.path.join(d, "dovecot.conf")
        dh = "/usr/share/dovecot/dh.pem"
        if self.tls:
            tls = f"""ssl = required
ssl_cert = <{self.certs['cert']}
ssl_key = <{self.certs['key']}
{f'ssl_dh = <{dh}' if os.path.exists(dh) else ''}
ssl_min_protocol = TLSv1.2
disable_plaintext_auth = yes
"""
            imaps = f"""  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.imaps_port}
    ssl = yes
  }}
"""
        else:
            tls = "ssl = no\ndisable_plaintext_auth = no\n"
            imaps = """  inet_listener imaps {
    port = 0
  }
"""
        with open(self.dovecot_conf, "w") as f:
            f.write(f"""base_dir = {d}/dovecot-run
state_dir = {d}/dovecot-state
log_path = {d}/dovecot.log
protocols = imap
listen = 127.0.0.1
{tls}auth_mechanisms = plain login
default_internal_user = dovecot
default_login_user = dovenull
mail_location = maildir:{d}/mail/%n
mail_uid = nobody
mail_gid = nogroup
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {d}/passwd
}}
userdb {{
  driver = static
  args = home={d}/mail/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.imap_port}
  }}
{imaps}}}
service auth {{
  unix_listener sasl {{
    mode = 0666
  }}
}}
protocol imap {{
  imap_idle_notify_interval = 2 mins
}}
""")

    def start_dovecot(self):
        log = os.path.join(self.dir, "dovecot.log")
        self.dovecot = subprocess.Popen(
            ["dovecot", "-c", self.dovecot_conf, "-F"],
            stdout=subprocess.DEVNULL, stderr=open(log, "a"))
        if self.tls:
            wait_port(self.imaps_port, proc=self.dovecot, log=log)
        wait_port(self.imap_port, proc=self.dovecot, log=log)

    def stop_dovecot(self):
        if self.dovecot is not None and self.dovecot.poll() is None:
            self.dovecot.terminate()
            try:
                self.dovecot.wait(10)
            except subprocess.TimeoutExpired:
                self.dovecot.kill()
                self.dovecot.wait()
        self.dovecot = None

    def restart_dovecot(self, pause=0.5):
        self.stop_dovecot()
        time.sleep(pause)
        self.start_dovecot()

    # Postfix

    def _start_postfix(self):
        d = self.dir
        pd = self.postfix_dir = os.path.join(d, "postfix")
        os.makedirs(pd)
        os.makedirs(os.path.join(d, "pfdata"))
        shutil.chown(os.path.join(d, "pfdata"), "postfix")
        os.makedirs(os.path.join(d, "pfqueue"))
        vmail = os.path.join(d, "vmail")
        os.makedirs(vmail)
        shutil.chown(vmail, "nobody", "nogroup")
        with open(os.path.join(d, "vmailbox"), "w") as f:
            for u in self.users:
                f.write(f"{u}@{DOMAIN} {u}/\n")
        self.smtps_port = free_port()
        self.submission_port = free_port()
        with open(os.path.join(pd, "main.cf"), "w") as f:
            f.write(f"""compatibility_level = 3.6
queue_directory = {d}/pfqueue
data_directory = {d}/pfdata
mail_owner = postfix
setgid_group = postdrop
myhostname = localhost
mydomain = localhost
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
local_recipient_maps =
relayhost =
smtputf8_enable = no
biff = no
maillog_file_prefixes = {d}
maillog_file = {d}/postfix.log
virtual_mailbox_domains = {DOMAIN}
virtual_mailbox_base = {vmail}
virtual_mailbox_maps = texthash:{d}/vmailbox
virtual_uid_maps = static:65534
virtual_gid_maps = static:65534
smtpd_tls_cert_file = {self.certs['cert']}
smtpd_tls_key_file = {self.certs['key']}
smtpd_tls_security_level = encrypt
smtpd_tls_auth_only = yes
smtpd_sasl_auth_enable = yes
smtpd_sasl_type = dovecot
smtpd_sasl_path = {d}/dovecot-run/sasl
smtpd_relay_restrictions = permit_sasl_authenticated, reject_unauth_destination
smtpd_recipient_restrictions = permit_sasl_authenticated, reject
""")
        with open(os.path.join(pd, "master.cf"), "w") as f:
            f.write(f"""127.0.0.1:{self.smtps_port} inet n - n - - smtpd
  -o smtpd_tls_wrappermode=yes
127.0.0.1:{self.submission_port} inet n - n - - smtpd
pickup unix n - n 60 1 pickup
cleanup unix n - n - 0 cleanup
qmgr unix n - n 300 1 qmgr
tlsmgr unix - - n 1000? 1 tlsmgr
rewrite unix - - n - - trivial-rewrite
bounce unix - - n - 0 bounce
defer unix - - n - 0 bounce
trace unix - - n - 0 bounce
verify unix - - n - 1 verify
flush unix n - n 1000? 0 flush
proxymap unix - - n - - proxymap
smtp unix - - n - - smtp
relay unix - - n - - smtp
showq unix n - n - - showq
error unix - - n - - error
retry unix - - n - - error
discard unix - - n - - discard
local unix - n n - - local
virtual unix - n n - - virtual
lmtp unix - - n - - lmtp
anvil unix - - n - 1 anvil
scache unix - - n - 1 scache
postlog unix-dgram n - n - 1 postlogd
""")
        log = os.path.join(d, "postfix.log")
        # Postfix reports a bad start only to syslog, and to a terminal:
        # `script` gives it one, so the reason reaches the test.
        r = subprocess.run(["script", "-qec", f"postfix -c {pd} start",
                            "/dev/null"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("postfix did not start:\n" + r.stdout +
                               r.stderr + self.log_tail())
        wait_port(self.smtps_port, log=log)
        wait_port(self.submission_port, log=log)

    def stop_postfix(self):
        if self.postfix_dir is None:
            return
        pidf = os.path.join(self.dir, "pfqueue", "pid", "master.pid")
        pid = None
        try:
            with open(pidf) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pass
        subprocess.run(["postfix", "-c", self.postfix_dir, "stop"],
                       capture_output=True)
        # postfix stop returns before the master has left.
        deadline = time.monotonic() + 10
        while pid is not None and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        self.postfix_dir = None

    def stop(self):
        self.stop_postfix()
        self.stop_dovecot()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # What the tests do with them

    def addr(self, user):
        return f"{user}@{DOMAIN}"

    def imap(self, user="bot"):
        ctx = ssl.create_default_context(cafile=self.certs["ca"])
        m = imaplib.IMAP4_SSL("127.0.0.1", self.imaps_port, ssl_context=ctx)
        m.login(self.addr(user), PASSWORD)
        return m

    def append(self, raw, user="bot", mailbox="INBOX"):
        """Put a message into the box, as a delivery would."""
        if isinstance(raw, str):
            raw = raw.encode()
        m = self.imap(user)
        try:
            typ, data = m.append(mailbox, None, None, raw)
            assert typ == "OK", (typ, data)
        finally:
            m.logout()

    def flags(self, user="bot", mailbox="INBOX"):
        """{uid: flags string} of every message in the box."""
        m = self.imap(user)
        try:
            m.select(mailbox)
            typ, data = m.uid("FETCH", "1:*", "(FLAGS)")
            out = {}
            for item in data:
                if not item:
                    continue
                s = item.decode() if isinstance(item, bytes) else item[0]
                if isinstance(s, bytes):
                    s = s.decode()
                import re
                mu = re.search(r"UID (\d+)", s)
                mf = re.search(r"FLAGS \(([^)]*)\)", s)
                if mu:
                    out[int(mu.group(1))] = mf.group(1) if mf else ""
            return out
        finally:
            m.logout()

    def delivered(self, user):
        """Messages Postfix put into user's maildir, parsed, oldest first."""
        base = os.path.join(self.dir, "vmail", user)
        out = []
        for sub in ("new", "cur"):
            p = os.path.join(base, sub)
            if not os.path.isdir(p):
                continue
            for name in os.listdir(p):
                with open(os.path.join(p, name), "rb") as f:
                    out.append((os.path.getmtime(os.path.join(p, name)),
                                email.message_from_bytes(f.read())))
        return [m for _, m in sorted(out, key=lambda x: x[0])]

    def wait_delivered(self, user, n=1, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.delivered(user)
            if len(got) >= n:
                return got
            time.sleep(0.1)
        raise AssertionError(f"{n} message(s) for {user} never arrived:\n"
                             + self.log_tail())

    def log_tail(self):
        out = ""
        for n in ("postfix.log", "dovecot.log"):
            p = os.path.join(self.dir, n)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out += f"--- {n}\n" + f.read()[-3000:]
        return out

    def dovecot_log(self):
        p = os.path.join(self.dir, "dovecot.log")
        if not os.path.exists(p):
            return ""
        with open(p, errors="replace") as f:
            return f.read()
