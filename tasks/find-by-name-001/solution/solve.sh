#!/bin/bash
find /app/timber -type f -name '*.conf' > /app/lagoon_found.txt
