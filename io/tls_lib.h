/* io/tls_lib.h - the OpenSSL functions the connection layer and its users
 * call, as one table of pointers.  vdsmd fills it with the functions it is
 * linked with (io_tls_lib_linked, tls_linked.c); vdsm-client with libssl
 * loaded by dlopen() only when it makes a TLS connection (io_tls_lib_load,
 * tls_load.c), so that `vdsm-client --insecure` never maps libssl.  The
 * prototypes come from the OpenSSL headers (type-checked through
 * __typeof__).  Only io/tls.c calls the read, write and handshake entries;
 * the users build their SSL_CTX through the context entries. */
#ifndef VD_IO_TLS_LIB_H
#define VD_IO_TLS_LIB_H

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define IO_TLS_FUNCS(X) \
	X(TLS_client_method) X(TLS_server_method) X(SSL_CTX_new) X(SSL_CTX_free) \
	X(SSL_CTX_ctrl) X(SSL_CTX_use_certificate_chain_file) X(SSL_CTX_use_PrivateKey_file) \
	X(SSL_CTX_check_private_key) X(SSL_CTX_load_verify_locations) X(SSL_CTX_set_verify) \
	X(SSL_new) X(SSL_free) X(SSL_set_fd) X(SSL_ctrl) X(SSL_set_connect_state) \
	X(SSL_set_accept_state) X(SSL_do_handshake) X(SSL_read) X(SSL_write) X(SSL_shutdown) \
	X(SSL_get_error) X(SSL_get_verify_result) X(SSL_in_before) X(SSL_get_version) \
	X(SSL_get1_peer_certificate) X(SSL_set1_host) X(SSL_get0_param) X(SSL_get_wbio) \
	X(X509_VERIFY_PARAM_set1_ip_asc) X(X509_free) X(X509_get_subject_name) \
	X(X509_NAME_oneline) X(X509_verify_cert_error_string) X(BIO_ctrl) \
	X(ERR_get_error) X(ERR_peek_error) X(ERR_peek_last_error) X(ERR_reason_error_string) \
	X(ERR_error_string_n) X(ERR_clear_error)

struct io_tls_lib {
#define IO_TLS_MEMBER(f) __typeof__(f) *f;  // NOLINT(bugprone-macro-parentheses): f names a member
	IO_TLS_FUNCS(IO_TLS_MEMBER)
#undef IO_TLS_MEMBER
};

#endif
