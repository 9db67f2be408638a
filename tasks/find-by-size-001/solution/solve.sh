#!/bin/bash
find /app/oak -type f -size +1000c > /app/large.txt
