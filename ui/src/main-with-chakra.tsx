/**
 * The bundle's entry for Airflow 3.1 (``main-with-chakra.js``, built with ``--mode with-chakra``).
 *
 * Airflow 3.1's UI lends a plugin React, ReactDOM and React Router on ``globalThis``, but not
 * Chakra UI nor Emotion (3.2 added ``ChakraUI`` and ``EmotionReact``), so this bundle brings its
 * own copy and wraps each app in its own ChakraProvider. Its system keeps out of the host's way:
 * CSS variables under a prefix of ours (``--jrs-*``, never redefining the host's ``--chakra-*``),
 * no CSS reset and no global styles (the host's already apply). Light and dark follow the host's
 * color mode, the ``dark`` class Airflow's UI puts on ``<html>``; the host's own colors (its
 * brand palette) are not ours to read here, so the apps wear Chakra's defaults on 3.1.
 */
import { ChakraProvider, createSystem, defaultConfig } from "@chakra-ui/react";
import type { ComponentType } from "react";

import { APPS, register } from "./apps";

const system = createSystem({ ...defaultConfig, cssVarsPrefix: "jrs", preflight: false, globalCss: {} });

function withOwnChakra<P extends object>(App: ComponentType<P>): ComponentType<P> {
  return function WithOwnChakra(props: P) {
    return (
      <ChakraProvider value={system}>
        <App {...props} />
      </ChakraProvider>
    );
  };
}

register(
  Object.fromEntries(Object.entries(APPS).map(([name, App]) => [name, withOwnChakra(App as ComponentType<object>)])),
);
