import Testing
@Test func placeholder_InterludeStoreTests() { #expect(Bool(true)) }
