#!/bin/bash
echo 'cumin' > /app/spice.txt
