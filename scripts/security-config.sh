#!/usr/bin/env bash
# The broker settings the security tests give BOTH brokers (the reference Kafka and Ringleader), one key=value a
# line, each passed as `--set key=value`; the certificates come from scripts/gen-test-certs.sh CERTDIR.
#
#   scripts/security-config.sh CERTDIR
#
# Listeners (names and protocols; the ports are the caller's): PLAINTEXT (setup, principal User:ANONYMOUS, a super
# user), SSL (ssl.client.auth=required: the principal is the client certificate's subject), SASL_SSL and
# SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). PLAIN's users are in the listeners' JAAS entries; SCRAM
# users are created by the tests with AlterUserScramCredentials (as a super user, over PLAINTEXT). Every listener
# needs a JAAS entry for every enabled mechanism, as Kafka's JaasContext.loadServerContext requires
# (clients/src/main/java/org/apache/kafka/common/security/JaasContext.java); SCRAM's carries no options.
# The StandardAuthorizer with super users ANONYMOUS (PLAINTEXT: the tests' setup, and Kafka's own controller and
# inter-broker traffic) and admin; allow.everyone.if.no.acl.found stays false (Kafka's default).
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 CERTDIR" >&2; exit 2; }
CERTS=$(cd "$1" && pwd)
PLAIN='org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
SCRAM='org.apache.kafka.common.security.scram.ScramLoginModule required;'
cat <<PROPS
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=$CERTS/server.keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$CERTS/ca.pem
listener.name.ssl.ssl.client.auth=required
PROPS
for l in sasl_ssl sasl_plaintext; do
  echo "listener.name.$l.plain.sasl.jaas.config=$PLAIN"
  echo "listener.name.$l.scram-sha-256.sasl.jaas.config=$SCRAM"
  echo "listener.name.$l.scram-sha-512.sasl.jaas.config=$SCRAM"
done
cat <<PROPS
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin
PROPS
