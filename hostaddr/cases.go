package hostaddr

// HostCase is one host and what it means: Want is the canonical address,
// "" for a name left to DNS, or "invalid"; Class is what the egress guard
// (loopback denied, nothing allowed) makes of that address: "" for
// allowed, else the refused class (egress.Class*).
type HostCase struct{ Host, Want, Class string }

// HostCases are the hosts the Go and SQL readings are tested on, side by
// side (hostaddr's tests and sql/url_rules_test.go), and the egress
// guard's tests judge their addresses: every spelling of an address, in
// ASCII or not, and every IPv6 form that embeds an IPv4 one.
var HostCases = []HostCase{
	{"127.0.0.1", "127.0.0.1", "loopback"},
	{"127.000.000.001", "127.0.0.1", "loopback"},
	{"0177.0.0.1", "127.0.0.1", "loopback"},
	{"0x7f.0.0.1", "127.0.0.1", "loopback"},
	{"0X7F.0.0.1", "127.0.0.1", "loopback"},
	{"0x7f.1", "127.0.0.1", "loopback"},
	{"127.1", "127.0.0.1", "loopback"},
	{"127.0.1", "127.0.0.1", "loopback"},
	{"2130706433", "127.0.0.1", "loopback"},
	{"0x7f000001", "127.0.0.1", "loopback"},
	{"017700000001", "127.0.0.1", "loopback"},
	{"127.0.0.1.", "127.0.0.1", "loopback"},
	{"0", "0.0.0.0", "unspecified"},
	{"0x", "0.0.0.0", "unspecified"},
	{"10.1", "10.0.0.1", "private"},
	{"012.0.0.1", "10.0.0.1", "private"},
	{"167772161", "10.0.0.1", "private"},
	{"0xa9fea9fe", "169.254.169.254", "link-local"},
	{"169.254.43518", "169.254.169.254", "link-local"},
	{"4294967295", "255.255.255.255", "broadcast"},
	{"192.168.0x1.1", "192.168.1.1", "private"},
	{"4294967296", "invalid", ""},
	{"1.2.3.256", "invalid", ""},
	{"256.1.1.1", "invalid", ""},
	{"1.2.65536", "invalid", ""},
	{"1.2.3.4.5", "invalid", ""},
	{"1..2.3", "invalid", ""},
	{"08.0.0.1", "invalid", ""},
	{"0x7g.0.0.1", "invalid", ""},
	{"example.123", "invalid", ""},
	{"example.0x1", "invalid", ""},
	{"1.2.3.4..", "invalid", ""},
	{".example", "invalid", ""},
	{"example..com", "invalid", ""},
	{"example.com.", "", ""},
	{"99999999999999999999999", "invalid", ""},
	{"example.com", "", ""},
	{"localhost", "", ""},
	{"1.2.3.example", "", ""},
	{"123.example", "", ""},
	{"0x7f.example", "", ""},
	{"example.0x", "invalid", ""},
	{"example.0xg", "", ""},
	{"xn--bcher-kva.example", "", ""},
	{"a.b.c.d", "", ""},
	{"[::1]", "::1", "loopback"},
	{"::1", "::1", "loopback"},
	{"[::ffff:127.0.0.1]", "::ffff:127.0.0.1", "loopback"},
	{"[fe80::1%25eth0]", "invalid", ""},
	{"[1.2.3.4]", "invalid", ""},
	{"[example]", "invalid", ""},
	// Not ASCII: mapped by IDNA as the HTTP client maps it, then read.
	{"10.0.0.①", "10.0.0.1", "private"}, // circled digit one
	{"１０．０．０．１", "10.0.0.1", "private"}, // fullwidth digits and dots
	{"169.254.169.②⑤④", "169.254.169.254", "link-local"},
	{"10。0。0。1", "10.0.0.1", "private"}, // ideographic full stop
	{"10｡0｡0｡1", "10.0.0.1", "private"}, // halfwidth ideographic full stop
	{"127.0.0.①", "127.0.0.1", "loopback"},
	{"⑩.0.0.1", "10.0.0.1", "private"},     // circled ten
	{"𝟏𝟐𝟕.0.0.1", "127.0.0.1", "loopback"}, // mathematical bold digits
	{"¹²⁷.0.0.1", "127.0.0.1", "loopback"}, // superscripts
	{"０ｘ７ｆ.１", "127.0.0.1", "loopback"},
	{"０ＸＡ９ＦＥＡ９ＦＥ", "169.254.169.254", "link-local"},
	{"２１３０７０６４３３", "127.0.0.1", "loopback"},
	{"10.0.0.1\u00ad", "10.0.0.1", "private"},    // soft hyphen: ignored by IDNA
	{"127.0.0.1\u200b", "127.0.0.1", "loopback"}, // zero width space: ignored
	{"\ufeff10.0.0.1", "10.0.0.1", "private"},    // byte order mark: ignored
	{"example.①", "invalid", ""},
	{"１０．０．０．１．", "10.0.0.1", "private"},
	{"１０．．１", "invalid", ""},
	{"１０．０．０．１：４４３", "invalid", ""}, // fullwidth colon
	{"10.0.0⒈", "invalid", ""},      // digit one full stop
	{"⑴.example", "invalid", ""},    // parenthesized digit
	{"⒑.0.0.1", "invalid", ""},      // number ten full stop
	{"a․b.example", "invalid", ""},  // one dot leader
	{"bücher.example", "", ""},
	{"BüCHER.Example", "", ""},
	{"ＥＸＡＭＰＬＥ.com", "", ""},
	{"Ⅻ.example", "", ""}, // roman numeral twelve: "xii"
	{"ß.example", "", ""},
	{"例え.テスト", "", ""},
	{"例え。テスト", "", ""},
	{"1.2.3.例", "", ""},
	{"-a.ü", "invalid", ""}, // a label starting with a hyphen
	{"ü.a-", "invalid", ""}, // a label ending with a hyphen
	{"[::ｆｆｆｆ:7f00:1]", "invalid", ""},
	// IPv6 forms that embed an IPv4 address: read as IPv6, judged by the
	// egress guard as the IPv4 inside.
	{"[::127.0.0.1]", "::7f00:1", "loopback"}, // IPv4-compatible
	{"[::a00:1]", "::a00:1", "private"},
	{"[::a9fe:a9fe]", "::a9fe:a9fe", "link-local"},
	{"[::ffff:0:a00:1]", "::ffff:0:a00:1", "private"}, // SIIT
	{"[::ffff:0:7f00:1]", "::ffff:0:7f00:1", "loopback"},
	{"[::ffff:0:a9fe:a9fe]", "::ffff:0:a9fe:a9fe", "link-local"},
	{"[::ffff:10.0.0.1]", "::ffff:10.0.0.1", "private"}, // IPv4-mapped
	{"[::ffff:169.254.169.254]", "::ffff:169.254.169.254", "link-local"},
	{"[64:ff9b::a00:1]", "64:ff9b::a00:1", "private"}, // NAT64, well-known prefix
	{"[64:ff9b::7f00:1]", "64:ff9b::7f00:1", "loopback"},
	{"[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe", "link-local"},
	{"[64:ff9b:1::a00:1]", "64:ff9b:1::a00:1", "private"}, // NAT64, local-use prefix
	{"[64:ff9b:1::7f00:1]", "64:ff9b:1::7f00:1", "loopback"},
	{"[64:ff9b:1::a9fe:a9fe]", "64:ff9b:1::a9fe:a9fe", "link-local"},
	{"[64:ff9b:1::808:808]", "64:ff9b:1::808:808", "reserved"}, // where a local translator puts the IPv4 is its own
	{"[2002:a00:1::1]", "2002:a00:1::1", "private"},            // 6to4
	{"[2002:7f00:1::1]", "2002:7f00:1::1", "loopback"},
	{"[2002:a9fe:a9fe::1]", "2002:a9fe:a9fe::1", "link-local"},
	// Allowed: public addresses, in any form, and names.
	{"8.8.8.8", "8.8.8.8", ""},
	{"８.８.８.８", "8.8.8.8", ""},
	{"[2606:4700::1111]", "2606:4700::1111", ""},
	{"[64:ff9b::808:808]", "64:ff9b::808:808", ""},
	{"[2002:808:808::1]", "2002:808:808::1", ""},
	{"[::ffff:8.8.8.8]", "::ffff:8.8.8.8", ""},
	{"hooks.example.com", "", ""},
}
