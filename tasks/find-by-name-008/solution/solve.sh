#!/bin/bash
find /app/lagoon -type f -name '*.conf' > /app/comet_found.txt
