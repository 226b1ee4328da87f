#!/usr/bin/env bash
# Throwaway TLS material for the TLS tests, made fresh for each run with the
# `openssl` command (Debian package openssl):
#
#   certs.sh DIR
#
# writes into DIR (created if needed):
#   ca.crt ca.key             the test CA
#   server.crt server.key     signed by it, valid now, for 127.0.0.1, ::1 and localhost
#   expired.crt expired.key   signed by it, for the same names, expired in 2020
#   wrongname.crt .key        signed by it, valid, but only for wrong.example
#   otherca.crt               another CA; badca.crt .key: a server cert it signed
#   client.crt client.key     a client certificate signed by the test CA (mutual TLS)
#   ip2.crt ip3.crt ip4.crt   (.key) signed by it, each valid only for its own
#                             address: IP:127.0.0.2, .3, .4 (servers bound there:
#                             loopback is all of 127.0.0.0/8)
# Quiet on success; prints openssl's complaint and exits non-zero otherwise.
set -euo pipefail

dir=${1:?usage: certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
log=certs.log
: > "$log"
run() { "$@" >>"$log" 2>&1 || { cat "$log" >&2; echo "certs.sh: failed: $*" >&2; exit 1; }; }

key() { run openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

ca() {  # name
  key "$1.key"
  run openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "/CN=distlock test $1" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$1.crt"
}

# leaf NAME CA SAN EXTKEYUSAGE [STARTDATE ENDDATE]: signed with `openssl ca`,
# which (unlike `x509 -req`) can set a validity period in the past.
leaf() {
  local name=$1 ca=$2 san=$3 eku=$4 start=${5:-} end=${6:-}
  key "$name.key"
  run openssl req -new -key "$name.key" -subj "/CN=$name" -out "$name.csr"
  mkdir -p "ca-$ca"
  [ -e "ca-$ca/index.txt" ] || : > "ca-$ca/index.txt"
  cat > "$name.cnf" <<EOF
[ ca ]
default_ca = d
[ d ]
dir = ca-$ca
database = ca-$ca/index.txt
new_certs_dir = ca-$ca
certificate = $ca.crt
private_key = $ca.key
rand_serial = yes
default_md = sha256
policy = p
unique_subject = no
copy_extensions = none
x509_extensions = e
[ p ]
commonName = supplied
[ e ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = $eku
subjectAltName = $san
EOF
  if [ -n "$start" ]; then
    run openssl ca -batch -notext -config "$name.cnf" -in "$name.csr" -out "$name.crt" \
      -startdate "$start" -enddate "$end"
  else
    run openssl ca -batch -notext -config "$name.cnf" -in "$name.csr" -out "$name.crt" -days 30
  fi
  rm -f "$name.csr" "$name.cnf"
}

local_names="IP:127.0.0.1,IP:::1,DNS:localhost"
ca ca
ca otherca
leaf server ca "$local_names" serverAuth
leaf expired ca "$local_names" serverAuth 20200101000000Z 20200201000000Z
leaf wrongname ca "DNS:wrong.example" serverAuth
leaf badca otherca "$local_names" serverAuth
leaf client ca "DNS:distlock-test-client" clientAuth
for n in 2 3 4; do leaf "ip$n" ca "IP:127.0.0.$n" serverAuth; done
chmod 600 ./*.key
