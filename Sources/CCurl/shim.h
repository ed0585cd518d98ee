/*
 * CCurl: libcurl for VipsLoad's HTTP transport (HTTPTransport).
 *
 * libcurl's option, info and multi-option setters are C variadic functions
 * (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt), which Swift
 * cannot call. Each wrapper below fixes the variadic argument to one type,
 * so Swift calls a plain function; the option decides the type, exactly as
 * libcurl documents it per option. Nothing else is wrapped, and no decision
 * is made here: every policy (status, limits, redirects, timeouts, address
 * checks) is Swift's.
 */
#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H

#include <curl/curl.h>

/* curl_easy_setopt with a long argument (CURLOPTTYPE_LONG options). */
static inline CURLcode vl_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/* curl_easy_setopt with a string (CURLOPTTYPE_STRINGPOINT options: libcurl copies it). */
static inline CURLcode vl_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/* curl_easy_setopt with a pointer (CURLOPTTYPE_OBJECTPOINT, CBPOINT and SLISTPOINT
   options: libcurl keeps the pointer, and the caller keeps what it points to alive). */
static inline CURLcode vl_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/* curl_easy_setopt with a write or header callback (CURLOPT_WRITEFUNCTION,
   CURLOPT_HEADERFUNCTION): a function pointer is not a void * in C. */
static inline CURLcode vl_curl_easy_setopt_write_function(CURL *handle, CURLoption option,
                                                         curl_write_callback function) {
    return curl_easy_setopt(handle, option, function);
}

/* curl_easy_setopt with the socket-opening callback (CURLOPT_OPENSOCKETFUNCTION): a
   function pointer is not a void * in C. The callback (Swift) sees each address libcurl is
   about to connect to, so the address policy judges the connection itself. */
static inline CURLcode vl_curl_easy_setopt_opensocket_function(CURL *handle,
                                                              curl_opensocket_callback function) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, function);
}

/* curl_easy_getinfo for a long result (CURLINFO_LONG). */
static inline CURLcode vl_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/* curl_easy_getinfo for a string result (CURLINFO_STRING; owned by the handle). */
static inline CURLcode vl_curl_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

/* curl_multi_setopt with a long argument (CURLMOPT_MAX_HOST_CONNECTIONS and the like). */
static inline CURLMcode vl_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

#endif
