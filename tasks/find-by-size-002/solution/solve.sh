#!/bin/bash
find /app/lagoon -type f -size +2000c > /app/large.txt
