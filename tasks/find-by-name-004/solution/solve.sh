#!/bin/bash
find /app/granite -type f -name '*.csv' > /app/needle_found.txt
