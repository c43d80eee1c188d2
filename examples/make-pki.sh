#!/bin/sh
# examples/make-pki.sh DIR - a throw-away PKI for vdsmd tests and trials.
#
# Creates in DIR (default ./pki):
#   ca.crt ca.key                 the CA vdsmd trusts (ca_file)
#   server.crt server.key         vdsmd's certificate (cert_file, key_file),
#                                 CN=localhost, SAN localhost/127.0.0.1/::1
#   client.crt client.key         a client certificate signed by that CA
#   wrong-ca.crt wrong-ca.key     a second, unrelated CA
#   wrong-client.crt wrong-client.key  a client signed by the wrong CA (refused)
# EC P-256 keys, 2 days validity by default (DAYS=N to change).  Not for
# production: keys are unencrypted.
#
#   vdsmd --tls on --cert-file DIR/server.crt --key-file DIR/server.key \
#         --ca-file DIR/ca.crt
set -eu
dir=${1:-pki}
days=${DAYS:-2}
mkdir -p "$dir"
cd "$dir"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() { # name CN
	key "$1.key"
	openssl req -x509 -new -key "$1.key" -sha256 -days "$days" -subj "/CN=$2" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.crt"
}

leaf() { # name CN ca usage [san]
	key "$1.key"
	openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$4"
		[ -n "${5:-}" ] && echo "subjectAltName=$5"
		true
	} > "$1.ext"
	openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial \
		-sha256 -days "$days" -extfile "$1.ext" -out "$1.crt" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}

ca ca "vdsmd test CA"
leaf server localhost ca serverAuth "DNS:localhost,IP:127.0.0.1,IP:::1"
leaf client "vdsmd test client" ca clientAuth
ca wrong-ca "unrelated CA"
leaf wrong-client "untrusted client" wrong-ca clientAuth
rm -f ./*.srl
chmod 644 ./*.crt
echo "PKI written to $(pwd)"
