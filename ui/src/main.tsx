/**
 * The bundle's entry for Airflow 3.2 and later (``main.js``). Airflow's UI imports this script
 * and renders, for each react app of the plugin, the component it finds on ``globalThis`` under
 * the app's ``name`` (``./apps``). The host lends its own React, React Router and Chakra UI
 * (``vite.config.ts``), so the apps render inside its ChakraProvider, in its theme.
 */
import { APPS, register } from "./apps";

register(APPS);
