/*
 * CMicroHTTPD: the C boundary of VipsServe, over libmicrohttpd (Debian's libmicrohttpd-dev).
 *
 * Swift cannot call C variadic functions, and a few of libmicrohttpd's calls are variadic
 * (MHD_start_daemon's option list, MHD_get_daemon_info, MHD_get_connection_info) or answer
 * with a union. Each wrapper here fixes one such call to a typed signature and does nothing
 * else: every option's value, and every decision, is made in Swift (Sources/VipsServe/HTTP).
 */
#ifndef CMICROHTTPD_SHIM_H
#define CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <microhttpd.h>
/* Not a wrapper: VipsServe's HangupWatcher polls suspended connections' sockets with epoll, and
   <sys/epoll.h> is not part of Swift's Glibc module, so the header is made visible here. */
#include <sys/epoll.h>

/* libmicrohttpd's error logger is called with a format and a va_list. Swift 6.3 crashes loading
   any Swift declaration of that function type back from a module, so the message is formatted
   here and handed to Swift as text: `handler(cls, message)`. */
typedef void (*vl_mhd_message_handler)(void *cls, const char *message);
struct vl_mhd_logger {
    vl_mhd_message_handler handler;
    void *cls;
};

static inline void vl_mhd_log_formatted(void *logger, const char *format, va_list arguments) {
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    const struct vl_mhd_logger *target = logger;
    target->handler(target->cls, message);
}

/* MHD_start_daemon is variadic: its callbacks (the error logger, given first as libmicrohttpd
   asks, through `logger`, which must outlive the daemon; the access handler; the
   request-completed notification; the URI logger, whose return value becomes the request's
   context; the connection notification, opened and closed, for the header deadlines) are fixed
   arguments here, all with closure `cls`, and every other option comes in `options`, an array
   ending with MHD_OPTION_END (MHD_OPTION_ARRAY). No accept policy callback. */
static inline struct MHD_Daemon *vl_mhd_start_daemon(
    unsigned int flags, uint16_t port, void *cls, struct vl_mhd_logger *logger, MHD_AccessHandlerCallback handler,
    MHD_RequestCompletedCallback completed,
    void *(*uri_logger)(void *cls, const char *uri, struct MHD_Connection *connection),
    MHD_NotifyConnectionCallback notify_connection, const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, cls,
                            MHD_OPTION_EXTERNAL_LOGGER, vl_mhd_log_formatted, logger,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_logger, cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, cls,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/* MHD_get_daemon_info is variadic and answers with a union: the port the daemon listens on
   (the one the kernel chose for port 0), or 0 when unknown. */
static inline uint16_t vl_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/* The same union: the number of open connections, or 0 when unknown. */
static inline unsigned int vl_mhd_current_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

/* MHD_get_connection_info is variadic and answers with a union: the status of the response
   queued on the connection (also one libmicrohttpd made itself, such as 431), or 0. */
static inline unsigned int vl_mhd_connection_status(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_HTTP_STATUS);
    return info == NULL ? 0 : info->http_status;
}

/* The same union: the connection's socket, or -1. */
static inline int vl_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/* The same union: the daemon that owns the connection (with a thread pool, the worker thread's
   own daemon, each with its share of the connection limit), or NULL. */
static inline struct MHD_Daemon *vl_mhd_connection_daemon(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_DAEMON);
    return info == NULL ? NULL : info->daemon;
}

/* The same union: the client's address (owned by the connection), or NULL. */
static inline const struct sockaddr *vl_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

#endif
