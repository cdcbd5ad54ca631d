package agent_test

import "syscall"

// setACL gives path the ACL (kind "access" or "default") user::rwx
// user:<uid>:rwx group::r-x mask::rwx other::r-x (Linux's xattr form).
func setACL(path, kind string, uid int) error {
	acl := []byte{2, 0, 0, 0}
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{1, 7, ^uint32(0)}, {2, 7, uint32(uid)}, {4, 5, ^uint32(0)}, {0x10, 7, ^uint32(0)}, {0x20, 5, ^uint32(0)}} {
		acl = append(acl, byte(e.tag), byte(e.tag>>8), byte(e.perm), byte(e.perm>>8), byte(e.id), byte(e.id>>8), byte(e.id>>16), byte(e.id>>24))
	}
	return syscall.Setxattr(path, "system.posix_acl_"+kind, acl, 0)
}
