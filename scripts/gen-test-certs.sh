#!/usr/bin/env bash
# Test certificates for the security tests, generated at test time into DIR (private keys are never committed):
#
#   scripts/gen-test-certs.sh DIR
#
# DIR/ca.pem                 the test CA's certificate (the truststore of clients and of the broker, PEM)
# DIR/server.keystore.pem    the broker's PEM keystore: its private key (unencrypted PKCS#8) followed by its
#                            certificate chain (server certificate, then the CA), the layout Kafka's
#                            ssl.keystore.type=PEM reads (clients/src/main/java/org/apache/kafka/common/security/
#                            ssl/DefaultSslEngineFactory.java, PemStore); SAN DNS:localhost, IP:127.0.0.1
# DIR/alice.keystore.pem     client keystore, subject CN=alice,OU=test,O=ringleader (same layout)
# DIR/alice.key / alice.pem  the same key and certificate as separate files (Python's ssl module)
# DIR/expired.keystore.pem   client keystore whose certificate expired in 2020 (CN=expired,OU=test,O=ringleader),
# DIR/expired.key / .pem     signed by the same CA, so only its validity period is wrong
#
# EC P-256 keys: quick to make, and served by rustls, Java and OpenSSL alike. Idempotent: an existing complete
# DIR is kept (DIR/.done), so parallel tests can share one.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
DIR=$1
mkdir -p "$DIR"
[[ -f "$DIR/.done" ]] && exit 0
TMP=$(mktemp -d "$DIR/.gen.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/O=ringleader/CN=ringleader test CA" -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# `openssl ca` (not `x509 -req`) because only it takes explicit start and end dates in OpenSSL 3.0, which the
# expired certificate needs.
mkdir -p db && : > db/index.txt && echo 1000 > db/serial
cat > ca.cnf <<'CNF'
[ ca ]
default_ca = test
[ test ]
dir = .
database = db/index.txt
serial = db/serial
new_certs_dir = db
certificate = ca.pem
private_key = ca.key
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[ any ]
# openssl ca writes the subject in the policy's order: O, OU, CN, which Java prints last-RDN-first.
organizationName = optional
organizationalUnitName = optional
commonName = supplied
[ server ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
[ client ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
CNF

# sign NAME SUBJECT EXT START END
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
  openssl ca -batch -config ca.cnf -extensions "$3" -startdate "$4" -enddate "$5" -notext -in "$1.csr" \
    -out "$1.pem" 2>/dev/null
  cat "$1.key" "$1.pem" ca.pem > "$1.keystore.pem"
}
now=$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)
later=$(date -u -d '+3650 days' +%Y%m%d%H%M%SZ)
sign server "/O=ringleader/CN=localhost" server "$now" "$later"
# Java's X500Principal.getName(): CN=alice,OU=test,O=ringleader.
sign alice "/O=ringleader/OU=test/CN=alice" client "$now" "$later"
sign expired "/O=ringleader/OU=test/CN=expired" client 20200101000000Z 20200102000000Z

for f in ca.pem server.keystore.pem alice.keystore.pem alice.key alice.pem expired.keystore.pem expired.key \
    expired.pem; do
  cp "$f" "$DIR/$f.tmp" && mv "$DIR/$f.tmp" "$DIR/$f"
done
touch "$DIR/.done"
