/* client/ssl.h - OpenSSL, loaded with dlopen() only when a TLS connection is
 * made, so that `vdsm-client --insecure` never pays for mapping and
 * relocating libssl/libcrypto (about 1 ms of a 2 ms run).
 *
 * The prototypes come from the OpenSSL headers (type-checked through
 * __typeof__); nothing in the binary references the libraries.  The
 * library stays loaded until exit (OpenSSL registers atexit handlers). */
#ifndef VD_CLIENT_SSL_H
#define VD_CLIENT_SSL_H

#include <stddef.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define CLIENT_SSL_FUNCS(X) \
	X(TLS_client_method) X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_ctrl) \
	X(SSL_CTX_use_certificate_chain_file) X(SSL_CTX_use_PrivateKey_file) \
	X(SSL_CTX_check_private_key) X(SSL_CTX_load_verify_locations) \
	X(SSL_CTX_set_verify) X(SSL_new) X(SSL_free) X(SSL_set_fd) X(SSL_ctrl) \
	X(SSL_connect) X(SSL_get_error) X(SSL_get_verify_result) X(SSL_read) \
	X(SSL_write) X(SSL_shutdown) X(ERR_peek_last_error) X(ERR_peek_error) \
	X(ERR_reason_error_string) X(ERR_clear_error) X(X509_verify_cert_error_string)

struct client_ssl {
#define CLIENT_SSL_MEMBER(f) __typeof__(f) *f;  // NOLINT(bugprone-macro-parentheses): f names a member
	CLIENT_SSL_FUNCS(CLIENT_SSL_MEMBER)
#undef CLIENT_SSL_MEMBER
};

/* Load libssl (libssl.so.3, else libssl.so) and resolve every function.
 * Returns 0, or -1 with a reason in why. */
int client_ssl_load(struct client_ssl *s, char *why, size_t whylen);

#endif
