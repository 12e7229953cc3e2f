// Prints Kafka's broker and group property tables, one JSON object a line, for generate.py.
// Run against Kafka's jars (pom.xml beside this file): the broker's KafkaConfig.configDef()
// with DynamicBrokerConfig's update mode of each property, and GroupConfig's ConfigDef.

import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.coordinator.group.GroupConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;

public final class KafkaConfigTable {
    public static void main(String[] args) {
        ConfigDef broker = kafka.server.KafkaConfig$.MODULE$.configDef();
        Map<String, String> modes = DynamicBrokerConfig.dynamicConfigUpdateModes();
        print("broker", broker, modes);
        print("group", GroupConfig.CONFIG_DEF, Map.of());
    }

    private static void print(String table, ConfigDef def, Map<String, String> modes) {
        for (ConfigDef.ConfigKey key : new TreeMap<>(def.configKeys()).values()) {
            StringBuilder out = new StringBuilder("{");
            field(out, "table", table).append(',');
            field(out, "name", key.name).append(',');
            field(out, "type", key.type.name().toLowerCase()).append(',');
            String dflt = key.hasDefault() ? ConfigDef.convertToString(key.defaultValue, key.type)
                : null;
            field(out, "default", dflt).append(',');
            field(out, "has_default", key.hasDefault() ? "true" : "false").append(',');
            field(out, "mode", modes.getOrDefault(key.name, "read-only")).append(',');
            field(out, "internal", key.internalConfig ? "true" : "false");
            System.out.println(out.append('}'));
        }
    }

    private static StringBuilder field(StringBuilder out, String name, String value) {
        out.append('"').append(name).append("\":");
        if (value == null) {
            return out.append("null");
        }
        out.append('"');
        for (char c : value.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"');
    }
}
