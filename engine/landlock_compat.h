/* Landlock definitions newer than Debian 12's kernel headers, which stop at the
 * first ABIs. Everything here is the kernel's stable user-space ABI
 * (include/uapi/linux/landlock.h); each item says which ABI brought it. The
 * guards let a newer system header win. */
#ifndef AF_LANDLOCK_COMPAT_H
#define AF_LANDLOCK_COMPAT_H

#include <linux/types.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset	444
#define __NR_landlock_add_rule		445
#define __NR_landlock_restrict_self	446
#endif

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION		(1U << 0)
#endif

/* ABI 2 and 3: renames across folders, truncation. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER		(1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE		(1ULL << 14)
#endif
/* ABI 5: ioctl on device files. */
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV		(1ULL << 15)
#endif

/* ABI 4: TCP ports. */
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP		(1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP		(1ULL << 1)
#endif

/* ABI 6: scopes. */
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET	(1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL			(1ULL << 1)
#endif

/* The rule type and attributes under our own names, so they never clash with a
 * newer system header that has them. The kernel reads only as much of the
 * ruleset attribute as the size it is given, and rejects non-zero bytes it does
 * not know: an older kernel gets the older size. */
#define AF_LANDLOCK_RULE_PATH_BENEATH	1
#define AF_LANDLOCK_RULE_NET_PORT	2

struct af_landlock_ruleset_attr {
	__u64	handled_access_fs;
	__u64	handled_access_net;	/* ABI 4 */
	__u64	scoped;			/* ABI 6 */
};

struct af_landlock_path_beneath_attr {
	__u64	allowed_access;
	__s32	parent_fd;
} __attribute__((packed));

struct af_landlock_net_port_attr {
	__u64	allowed_access;
	__u64	port;
};

#endif
