/*
 * Reads a file of concatenated Hercules events with the genuine Java reader (vostok/hercules
 * EventReader) and prints one JSON object per event: version, timestamp, uuid, tags. Written for
 * wirelog's cross-check (tests/test_hercules_java.py); compile it against a vostok/hercules checkout.
 */
import java.nio.file.*;
import java.util.*;
import java.lang.reflect.Array;
import ru.kontur.vostok.hercules.protocol.*;
import ru.kontur.vostok.hercules.protocol.decoder.*;

public class Dump {
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
    static String val(Type t, Object v) {
        switch (t) {
            case CONTAINER: return cont((Container) v);
            case STRING: return q(new String((byte[]) v, java.nio.charset.StandardCharsets.UTF_8));
            case UUID: return q(v.toString());
            case NULL: return "null";
            case BYTE: return Integer.toString(((Byte) v) & 0xff);
            case FLOAT: case DOUBLE: {
                double d = ((Number) v).doubleValue();
                if (Double.isNaN(d)) return "\"NaN\"";
                if (Double.isInfinite(d)) return d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
                return v.toString();
            }
            case VECTOR: {
                ru.kontur.vostok.hercules.protocol.Vector vec = (ru.kontur.vostok.hercules.protocol.Vector) v;
                Object arr = vec.getValue();
                StringBuilder b = new StringBuilder("[");
                int n = Array.getLength(arr);
                for (int i = 0; i < n; i++) {
                    if (i > 0) b.append(',');
                    b.append(val(vec.getType(), Array.get(arr, i)));
                }
                return b.append(']').toString();
            }
            default: return v.toString();
        }
    }
    static String cont(Container c) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<TinyString, Variant> e : c.tags().entrySet()) {
            if (!first) b.append(',');
            first = false;
            b.append(q(e.getKey().toString())).append(':').append(val(e.getValue().getType(), e.getValue().getValue()));
        }
        return b.append('}').toString();
    }
    public static void main(String[] a) throws Exception {
        byte[] data = Files.readAllBytes(Paths.get(a[0]));
        Decoder d = new Decoder(data);
        EventReader r = EventReader.readAllTags();
        while (d.position() < data.length) {
            Event e = r.read(d);
            System.out.println("{\"version\":" + e.getVersion() + ",\"timestamp\":" + e.getTimestamp() + ",\"uuid\":" + q(e.getUuid().toString()) + ",\"tags\":" + cont(e.getPayload()) + "}");
        }
    }
}
