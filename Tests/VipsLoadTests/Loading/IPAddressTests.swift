import VipsLoad
import XCTest

/// The address classifier behind `SourceAddressPolicy`: every range, at both
/// of its edges, and every IPv6 form that carries an IPv4 address.
final class IPAddressTests: XCTestCase {
    private func scope(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> IPAddress.Scope? {
        guard let address = IPAddress(text) else {
            XCTFail("\(text) does not parse", file: file, line: line)
            return nil
        }
        return address.scope
    }

    private func assertScopes(
        _ table: [(String, IPAddress.Scope)], file: StaticString = #filePath, line: UInt = #line
    ) {
        for (text, expected) in table {
            XCTAssertEqual(scope(text, file: file, line: line), expected, text, file: file, line: line)
        }
    }

    func testIPv4RangesAtTheirEdges() {
        assertScopes([
            ("0.0.0.0", .unspecified), ("0.255.255.255", .unspecified), ("1.0.0.0", .public),
            ("9.255.255.255", .public), ("10.0.0.0", .privateNetwork), ("10.255.255.255", .privateNetwork),
            ("11.0.0.0", .public),
            ("100.63.255.255", .public), ("100.64.0.0", .sharedAddressSpace),
            ("100.127.255.255", .sharedAddressSpace), ("100.128.0.0", .public),
            ("126.255.255.255", .public), ("127.0.0.0", .loopback), ("127.0.0.1", .loopback),
            ("127.255.255.255", .loopback), ("128.0.0.0", .public),
            ("169.253.255.255", .public), ("169.254.0.0", .linkLocal), ("169.254.169.254", .linkLocal),
            ("169.254.255.255", .linkLocal), ("169.255.0.0", .public),
            ("172.15.255.255", .public), ("172.16.0.0", .privateNetwork), ("172.31.255.255", .privateNetwork),
            ("172.32.0.0", .public),
            ("192.0.0.0", .reserved), ("192.0.0.255", .reserved), ("192.0.1.0", .public),
            ("192.0.2.0", .reserved), ("192.0.2.255", .reserved), ("192.0.3.0", .public),
            ("192.88.99.1", .reserved), ("192.88.98.1", .public),
            ("192.167.255.255", .public), ("192.168.0.0", .privateNetwork), ("192.168.255.255", .privateNetwork),
            ("192.169.0.0", .public),
            ("198.17.255.255", .public), ("198.18.0.0", .reserved), ("198.19.255.255", .reserved),
            ("198.20.0.0", .public), ("198.51.100.7", .reserved), ("198.51.101.7", .public),
            ("203.0.113.9", .reserved), ("203.0.112.9", .public),
            ("223.255.255.255", .public), ("224.0.0.0", .multicast), ("224.0.0.1", .multicast),
            ("239.255.255.255", .multicast), ("240.0.0.0", .reserved), ("255.255.255.254", .reserved),
            ("255.255.255.255", .broadcast),
            ("8.8.8.8", .public), ("93.184.216.34", .public)
        ])
    }

    func testIPv6Ranges() {
        assertScopes([
            ("::", .unspecified), ("::1", .loopback), ("[::1]", .loopback),
            ("fe80::", .linkLocal), ("fe80::1", .linkLocal), ("febf:ffff::1", .linkLocal),
            ("fec0::1", .privateNetwork), ("feff::1", .privateNetwork),
            ("fc00::", .privateNetwork), ("fd12:3456::1", .privateNetwork), ("fdff:ffff::1", .privateNetwork),
            ("fe00::1", .reserved), ("fb00::1", .reserved),
            ("ff00::", .multicast), ("ff02::1", .multicast), ("ff05::1:3", .multicast),
            ("2000::1", .public), ("2001:4860:4860::8888", .public), ("2606:4700:4700::1111", .public),
            ("3fff:ffff::1", .public), ("4000::1", .reserved), ("1fff::1", .reserved),
            ("2001:db8::1", .reserved), ("2001:db9::1", .public),
            ("2001::1", .reserved), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", .reserved),
            ("2001:10::1", .reserved), ("2001:20::1", .reserved), ("2001:1ff::1", .reserved),
            ("2001:200::1", .public),
            ("100::1", .reserved), ("64:ff9b:1::1", .reserved)
        ])
    }

    func testIPv6FormsCarryingAnIPv4AddressAreJudgedByIt() {
        assertScopes([
            // IPv4-mapped.
            ("::ffff:127.0.0.1", .loopback), ("::ffff:7f00:1", .loopback), ("::ffff:10.1.2.3", .privateNetwork),
            ("::ffff:169.254.169.254", .linkLocal), ("::ffff:100.64.0.1", .sharedAddressSpace),
            ("::ffff:0.0.0.0", .unspecified), ("::ffff:224.0.0.1", .multicast),
            ("::ffff:255.255.255.255", .broadcast), ("::ffff:8.8.8.8", .public),
            // IPv4-translated (SIIT).
            ("::ffff:0:127.0.0.1", .loopback), ("::ffff:0:8.8.8.8", .public),
            // IPv4-compatible (deprecated).
            ("::127.0.0.1", .loopback), ("::192.168.1.1", .privateNetwork), ("::8.8.8.8", .public),
            ("::0.0.0.2", .unspecified),
            // NAT64's well-known prefix.
            ("64:ff9b::127.0.0.1", .loopback), ("64:ff9b::a9fe:a9fe", .linkLocal), ("64:ff9b::8.8.8.8", .public),
            // 6to4.
            ("2002:7f00:1::", .loopback), ("2002:c0a8:101::1", .privateNetwork), ("2002:808:808::1", .public)
        ])
        XCTAssertEqual(IPAddress("::ffff:127.0.0.2")?.embeddedIPv4, IPAddress("127.0.0.2"))
        XCTAssertNil(IPAddress("::1")?.embeddedIPv4, "::1 is loopback itself, not 0.0.0.1")
        XCTAssertNil(IPAddress("::")?.embeddedIPv4)
        XCTAssertNil(IPAddress("2001:db8::1")?.embeddedIPv4)
        XCTAssertNil(IPAddress("127.0.0.1")?.embeddedIPv4)
    }

    func testParsingIsStrictAndPrintingIsCanonical() {
        for text in [
            "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433", "1.2.3.4 ",
            ":::1", "fe80::1%eth0", "[::1", "example.com"
        ] {
            XCTAssertNil(IPAddress(text), text)
        }
        XCTAssertEqual(IPAddress("::FFFF:127.0.0.1")?.description, "::ffff:127.0.0.1")
        XCTAssertEqual(IPAddress("2001:0db8:0000:0000:0000:0000:0000:0001")?.description, "2001:db8::1")
        XCTAssertEqual(IPAddress("10.0.0.1")?.description, "10.0.0.1")
        XCTAssertEqual(IPAddress(bytes: [127, 0, 0, 1])?.scope, .loopback)
        XCTAssertNil(IPAddress(bytes: [1, 2, 3]))
    }

    func testNetworksContainTheirAddressesAndTheIPv6FormsOfThem() throws {
        let ten = try XCTUnwrap(IPNetwork("10.0.0.0/8"))
        XCTAssertTrue(ten.contains(try XCTUnwrap(IPAddress("10.255.0.1"))))
        XCTAssertFalse(ten.contains(try XCTUnwrap(IPAddress("11.0.0.1"))))
        XCTAssertTrue(ten.contains(try XCTUnwrap(IPAddress("::ffff:10.1.2.3"))))
        XCTAssertFalse(ten.contains(try XCTUnwrap(IPAddress("fd00::1"))))
        let one = try XCTUnwrap(IPNetwork("127.0.0.1"))
        XCTAssertEqual(one.prefixLength, 32)
        XCTAssertTrue(one.contains(try XCTUnwrap(IPAddress("127.0.0.1"))))
        XCTAssertFalse(one.contains(try XCTUnwrap(IPAddress("127.0.0.2"))))
        let odd = try XCTUnwrap(IPNetwork("172.20.1.1/12"))
        XCTAssertEqual(odd.description, "172.16.0.0/12", "host bits are cleared")
        XCTAssertTrue(odd.contains(try XCTUnwrap(IPAddress("172.31.255.255"))))
        XCTAssertFalse(odd.contains(try XCTUnwrap(IPAddress("172.32.0.0"))))
        let ula = try XCTUnwrap(IPNetwork("fd00::/8"))
        XCTAssertTrue(ula.contains(try XCTUnwrap(IPAddress("fdab::1"))))
        XCTAssertFalse(ula.contains(try XCTUnwrap(IPAddress("fc00::1"))))
        XCTAssertFalse(ula.contains(try XCTUnwrap(IPAddress("10.0.0.1"))))
        XCTAssertTrue(try XCTUnwrap(IPNetwork("0.0.0.0/0")).contains(try XCTUnwrap(IPAddress("8.8.8.8"))))
        for text in ["10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/", "10.0.0.0/8/8", "x/8", "10.0.0.0/٨"] {
            XCTAssertNil(IPNetwork(text), text)
        }
    }

    func testPoliciesAllowByScopeAndByNetwork() throws {
        let loopback = try XCTUnwrap(IPAddress("127.0.0.1"))
        let metadata = try XCTUnwrap(IPAddress("169.254.169.254"))
        let google = try XCTUnwrap(IPAddress("8.8.8.8"))
        XCTAssertTrue(SourceAddressPolicy.unrestricted.isUnrestricted)
        XCTAssertTrue([loopback, metadata, google].allSatisfy(SourceAddressPolicy.unrestricted.allows))
        XCTAssertFalse(SourceAddressPolicy.publicOnly.isUnrestricted)
        XCTAssertTrue(SourceAddressPolicy.publicOnly.allows(google))
        XCTAssertFalse(SourceAddressPolicy.publicOnly.allows(loopback))
        XCTAssertFalse(SourceAddressPolicy.publicOnly.allows(metadata))
        XCTAssertFalse(SourceAddressPolicy.publicOnly.allows(try XCTUnwrap(IPAddress("::ffff:169.254.169.254"))))
        let excepted = SourceAddressPolicy(
            allowedScopes: [.public], allowedNetworks: [try XCTUnwrap(IPNetwork("127.0.0.1"))])
        XCTAssertTrue(excepted.allows(loopback))
        XCTAssertTrue(excepted.allows(try XCTUnwrap(IPAddress("::ffff:127.0.0.1"))))
        XCTAssertFalse(excepted.allows(try XCTUnwrap(IPAddress("127.0.0.2"))))
        XCTAssertFalse(excepted.allows(try XCTUnwrap(IPAddress("::1"))))
    }
}
