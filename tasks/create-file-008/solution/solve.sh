#!/bin/bash
mkdir -p /app/lantern && printf '%s\n' 'nectar ridge load dolphin cobalt' 'silver topaz cotton proud' 'tulip jungle fetch boulder' > /app/lantern/rapid_kettle.txt
