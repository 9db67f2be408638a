#!/bin/bash
find /app/lagoon -type f -name '*.conf' > /app/found.txt
